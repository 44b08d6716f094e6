# What `trainer --version` reports about the build: compiler, oneDNN, CUDA, cuDNN, the GPU
# architectures compiled, NCCL, and the git commit (regenerated at every build, so a commit without a
# reconfigure still shows). Included from CMakeLists.txt after the CUDA detection.
set(TRAINER_BUILD_COMPILER "${CMAKE_CXX_COMPILER_ID} ${CMAKE_CXX_COMPILER_VERSION}, ${CMAKE_BUILD_TYPE}")
set(TRAINER_BUILD_ONEDNN "${dnnl_VERSION}")
if(TRAINER_HAVE_CUDA)
  set(TRAINER_BUILD_CUDNN "unknown")
  if(EXISTS "${CUDNN_INCLUDE_DIR}/cudnn_version.h")
    file(STRINGS "${CUDNN_INCLUDE_DIR}/cudnn_version.h" cudnn_defines REGEX "#define CUDNN_(MAJOR|MINOR|PATCHLEVEL) ")
    foreach(part MAJOR MINOR PATCHLEVEL)
      string(REGEX MATCH "CUDNN_${part} +([0-9]+)" _ "${cudnn_defines}")
      set(cudnn_${part} "${CMAKE_MATCH_1}")
    endforeach()
    set(TRAINER_BUILD_CUDNN "${cudnn_MAJOR}.${cudnn_MINOR}.${cudnn_PATCHLEVEL}")
  endif()
  set(TRAINER_BUILD_CUDA "${CUDAToolkit_VERSION}")
  string(REPLACE ";" " " TRAINER_BUILD_CUDA_ARCHS "${CMAKE_CUDA_ARCHITECTURES}")
  set(TRAINER_BUILD_NCCL "")
  if(TRAINER_HAVE_NCCL)
    file(STRINGS "${NCCL_INCLUDE_DIR}/nccl.h" nccl_defines REGEX "#define NCCL_(MAJOR|MINOR|PATCH) ")
    foreach(part MAJOR MINOR PATCH)
      string(REGEX MATCH "NCCL_${part} +([0-9]+)" _ "${nccl_defines}")
      set(nccl_${part} "${CMAKE_MATCH_1}")
    endforeach()
    set(TRAINER_BUILD_NCCL "${nccl_MAJOR}.${nccl_MINOR}.${nccl_PATCH}")
  endif()
else()
  set(TRAINER_BUILD_CUDA "")
  set(TRAINER_BUILD_CUDNN "")
  set(TRAINER_BUILD_CUDA_ARCHS "")
  set(TRAINER_BUILD_NCCL "")
endif()
configure_file(${CMAKE_SOURCE_DIR}/cmake/build_info.h.in ${CMAKE_BINARY_DIR}/generated/trainer_build_info.h @ONLY)

# The commit, at build time: generated/trainer_git_commit.h, rewritten only when it changes.
add_custom_target(trainer_git_commit
  COMMAND ${CMAKE_COMMAND} -DSOURCE_DIR=${CMAKE_SOURCE_DIR}
          -DOUTPUT=${CMAKE_BINARY_DIR}/generated/trainer_git_commit.h -P ${CMAKE_SOURCE_DIR}/cmake/git_commit.cmake
  BYPRODUCTS ${CMAKE_BINARY_DIR}/generated/trainer_git_commit.h
  COMMENT "trainer: git commit for --version" VERBATIM)
