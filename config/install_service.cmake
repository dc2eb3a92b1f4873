# Runs inside `cmake --install` (config/CMakeLists.txt), where CMAKE_INSTALL_PREFIX is the prefix
# being installed to and DESTDIR, if set, is honoured by file(INSTALL). Installs the service's
# configuration and unit with that prefix's paths, by the rule GNUInstallDirs uses for
# SYSCONFDIR: the prefixes / and /usr keep their configuration in /etc, any other in <prefix>/etc.
if(CMAKE_INSTALL_PREFIX MATCHES "^/(usr/?)?$")
  set(sysconfdir /etc)
  set(unitdir /lib/systemd/system)
else()
  set(sysconfdir ${CMAKE_INSTALL_PREFIX}/etc)
  set(unitdir ${CMAKE_INSTALL_PREFIX}/lib/systemd/system)
endif()
cmake_path(APPEND CMAKE_INSTALL_PREFIX ${KIWI_INSTALL_BINDIR} kiwi-agent OUTPUT_VARIABLE KIWI_AGENT)
cmake_path(APPEND CMAKE_INSTALL_PREFIX ${KIWI_INSTALL_DOCDIR} OUTPUT_VARIABLE KIWI_DOCDIR)
set(KIWI_CONFIG ${sysconfdir}/kiwi-agent/kiwi-agent.toml)
# The unit is made in a directory of this install's own: two installs of one build tree at once
# (the install and SDK tests run in parallel) must not write one file under each other.
string(RANDOM LENGTH 16 stage)
set(stage ${KIWI_CONFIG_BINARY_DIR}/install-${stage})
configure_file(${KIWI_CONFIG_SOURCE_DIR}/kiwi-agent.service.in ${stage}/kiwi-agent.service @ONLY)
file(INSTALL DESTINATION ${unitdir} TYPE FILE FILES ${stage}/kiwi-agent.service)
file(REMOVE_RECURSE ${stage})
file(INSTALL DESTINATION ${sysconfdir}/kiwi-agent TYPE FILE
     FILES ${KIWI_CONFIG_SOURCE_DIR}/etc/kiwi-agent.toml)
file(INSTALL DESTINATION ${sysconfdir}/kiwi-agent TYPE DIRECTORY
     FILES ${KIWI_CONFIG_BINARY_DIR}/conf.d)
