# cmake -DTRAINER=... -DHELP2MAN=... -DOUTPUT=... -P man_page.cmake: the man page of trainer from
# its --help, with one section per verb (the "Subcommands:" of --help) made from
# `trainer VERB --help`.
execute_process(COMMAND ${TRAINER} --help OUTPUT_VARIABLE top RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "man page: '${TRAINER} --help' failed (${rc})")
endif()
string(REGEX REPLACE ".*\nSubcommands:\n" "" listing "${top}")
string(REGEX MATCHALL "(^|\n)  [a-z]+" verbs "${listing}")
list(TRANSFORM verbs STRIP)
set(include_file "${OUTPUT}.verbs")
set(text "[VERBS]\n")
foreach(verb ${verbs})
  execute_process(COMMAND ${TRAINER} ${verb} --help OUTPUT_VARIABLE help RESULT_VARIABLE rc ERROR_QUIET)
  if(NOT rc EQUAL 0)  # e.g. plot without python3: the page still names the verb
    message(WARNING "man page: '${TRAINER} ${verb} --help' failed (${rc}); its section says so")
    set(help "see trainer ${verb} --help\n")
  endif()
  # roff: a leading dot or quote would start a request; backslashes are escapes.
  string(REPLACE "\\" "\\e" help "${help}")
  string(REGEX REPLACE "(^|\n)([.'])" "\\1\\\\&\\2" help "${help}")
  string(APPEND text ".SS trainer ${verb}\n.nf\n${help}.fi\n")
endforeach()
string(APPEND text "[EXIT STATUS]\n0 success; 1 internal error; 2 usage; 3 config; 4 data; 5 runtime or device; 130 interrupted (see README, Exit codes)\n")
string(APPEND text "[ENVIRONMENT]\nNO_COLOR: any non-empty value turns colours off. OMP_NUM_THREADS: CPU threads when neither --threads nor the config's threads is given. CUDA_VISIBLE_DEVICES: the GPUs gpu:N counts.\n")
file(WRITE "${include_file}" "${text}")
# "trainer 0.1.0" from the first line of --version; the commit and build details stay out of the page.
execute_process(COMMAND ${TRAINER} --version OUTPUT_VARIABLE version RESULT_VARIABLE rc)
string(REGEX REPLACE " \\(.*" "" version "${version}")
execute_process(COMMAND ${HELP2MAN} --no-info --section=1 "--name=train neural networks from YAML configs"
                        "--version-string=${version}"
                        --include=${include_file} --output=${OUTPUT} ${TRAINER}
                RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "man page: help2man failed (${rc})")
endif()
