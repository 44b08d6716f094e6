# Included by the top CMakeLists.txt in a fuzzing build (TRAINER_FUZZ), before it defines the
# libraries: every C++ file of ours (datasets, lib, the targets) is compiled with coverage for
# libFuzzer, ASan and UBSan (every UBSan report is fatal, so libFuzzer sees it as a crash).
if(NOT CMAKE_CXX_COMPILER_ID STREQUAL "Clang")
  message(FATAL_ERROR "TRAINER_FUZZ needs clang: configure with CC=clang CXX=clang++")
endif()
set(FUZZ_SANITIZERS -fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer)
add_compile_options(-fsanitize=fuzzer-no-link ${FUZZ_SANITIZERS})
