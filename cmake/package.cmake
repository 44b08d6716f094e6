# The Debian package (issue 31): `cpack -G DEB` in a CPU-only build directory, or
# scripts/package.sh, makes trainer_<version>_amd64.deb holding
#   /usr/bin/trainer                                   the program
#   /usr/share/man/man1/trainer.1.gz                   the man page (cmake/docs.cmake)
#   /usr/share/bash-completion/completions/trainer     bash completion (cmake/docs.cmake)
#   /usr/share/trainer/configs/*.yaml                  the shipped configs
#   /usr/share/trainer/scripts/plot.py                 what `trainer plot` runs
#   /usr/share/doc/trainer/                            README, CHANGELOG, docs/
# Its dependencies are computed from the binary by dpkg-shlibdeps (libdnnl2.6, libyaml-cpp0.7,
# libpng16-16, ...): Debian's packages only. A CUDA build links NVIDIA's libraries, which are no
# Debian packages, so it is not packaged (docs/install.md: building for a GPU); package.sh says so.
include(GNUInstallDirs)
install(DIRECTORY ${CMAKE_SOURCE_DIR}/configs/ DESTINATION ${CMAKE_INSTALL_DATADIR}/trainer/configs
        FILES_MATCHING PATTERN "*.yaml")
# Beside the configs, so that their first line (# yaml-language-server: $schema=../docs/...)
# points an editor at the schema in the installed tree too.
install(FILES ${CMAKE_SOURCE_DIR}/docs/trainer.schema.json DESTINATION ${CMAKE_INSTALL_DATADIR}/trainer/docs)
install(PROGRAMS ${CMAKE_SOURCE_DIR}/scripts/plot.py DESTINATION ${CMAKE_INSTALL_DATADIR}/trainer/scripts)
install(FILES ${CMAKE_SOURCE_DIR}/README.md ${CMAKE_SOURCE_DIR}/CHANGELOG.md ${CMAKE_SOURCE_DIR}/CONTRIBUTING.md
        DESTINATION ${CMAKE_INSTALL_DOCDIR})
install(DIRECTORY ${CMAKE_SOURCE_DIR}/docs/ DESTINATION ${CMAKE_INSTALL_DOCDIR}/docs)

set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME trainer)
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_CONTACT "trainer developers <trainer@localhost>")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "train neural networks from a YAML config (oneDNN, cuDNN)")
set(CPACK_PACKAGE_DESCRIPTION
    "One native command trains, evaluates and runs networks described in a YAML file, on CPUs through\n"
    "oneDNN. Every key is checked before anything runs; checkpoints are atomic; image folders,\n"
    "CSV tables and NPY arrays are read as they are.")
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)  # trainer_<version>_<arch>.deb
set(CPACK_DEBIAN_PACKAGE_SECTION science)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
# `trainer plot` needs python3 with matplotlib; the shipped configs read these data sets in place.
set(CPACK_DEBIAN_PACKAGE_RECOMMENDS "python3-matplotlib, dataset-fashion-mnist")
set(CPACK_DEBIAN_PACKAGE_SUGGESTS "python3-sklearn, openmpi-bin")
set(CPACK_STRIP_FILES ON)
include(CPack)
