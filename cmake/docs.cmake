# The man page and the bash completion of `trainer`, and their install rules (README "Install").
#   man page         build/trainer.1, generated with help2man from `trainer --help` and every
#                    verb's --help (help2man is in scripts/setup.sh's packages). Without help2man
#                    the build goes on without it and says so.
#   bash completion  scripts/trainer-completion.bash, installed as
#                    share/bash-completion/completions/trainer.
include(GNUInstallDirs)
install(TARGETS trainer RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(FILES ${CMAKE_SOURCE_DIR}/scripts/trainer-completion.bash
        DESTINATION ${CMAKE_INSTALL_DATADIR}/bash-completion/completions RENAME trainer)

find_program(HELP2MAN_EXECUTABLE help2man)
if(HELP2MAN_EXECUTABLE)
  set(TRAINER_MAN_PAGE ${CMAKE_BINARY_DIR}/trainer.1)
  # help2man reads `trainer --help` and `--version`; the verbs' options follow as an included
  # section, so the one page documents every flag.
  add_custom_command(
    OUTPUT ${TRAINER_MAN_PAGE}
    COMMAND ${CMAKE_COMMAND} -DTRAINER=$<TARGET_FILE:trainer> -DHELP2MAN=${HELP2MAN_EXECUTABLE}
            -DOUTPUT=${TRAINER_MAN_PAGE} -P ${CMAKE_SOURCE_DIR}/cmake/man_page.cmake
    DEPENDS trainer ${CMAKE_SOURCE_DIR}/cmake/man_page.cmake
    COMMENT "trainer: man page (help2man)" VERBATIM)
  add_custom_target(trainer_man_page ALL DEPENDS ${TRAINER_MAN_PAGE})
  install(FILES ${TRAINER_MAN_PAGE} DESTINATION ${CMAKE_INSTALL_MANDIR}/man1)
  message(STATUS "trainer: man page build/trainer.1 from help2man (${HELP2MAN_EXECUTABLE})")
else()
  message(STATUS "trainer: help2man not found: no man page is built (apt-get install help2man, or "
                 "scripts/setup.sh, then re-run cmake); everything else builds as usual")
endif()
