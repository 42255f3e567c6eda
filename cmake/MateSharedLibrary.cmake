# libmate.so (target `mate`, exported as mate::mate): every component and the `mate` program's
# commands in one shared library. A process that loads MATE more than once — a kernel library,
# the Python extension, the `mate` program, a library `mate replay --lib` loads — then has one
# registry, one log sink, one dump writer and one guard: static copies in two modules would each
# have their own.
#
# Whole archives, so that objects nothing references yet (registration objects: the reference
# kernels' MATE_REPLAYABLE lines, the dump writer's call hook, the commands) are kept.
get_property(mate_component_libraries GLOBAL PROPERTY MATE_COMPONENT_LIBRARIES)
add_library(mate SHARED ${PROJECT_SOURCE_DIR}/src/cli/run_program.cpp)
add_library(mate::mate ALIAS mate)
# (Spelled as linker flags: CMake's WHOLE_ARCHIVE feature refuses a library that another one in
# the list also links normally, as every component links the ones before it. Listed once more
# after, so that their own dependencies — fmt, xxhash — come with them.)
set(mate_whole_archives "")
foreach(lib IN LISTS mate_component_libraries ITEMS mate_cli_commands)
  list(APPEND mate_whole_archives "$<TARGET_FILE:${lib}>")
endforeach()
target_link_libraries(mate PRIVATE "-Wl,--whole-archive" ${mate_whole_archives} "-Wl,--no-whole-archive"
                      mate_components mate_cli_commands)
add_dependencies(mate ${mate_component_libraries} mate_cli_commands)
target_link_libraries(mate PUBLIC dlpack::dlpack nlohmann_json::nlohmann_json Threads::Threads ${CMAKE_DL_LIBS})
target_include_directories(mate PUBLIC
  $<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}/include>
  $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>)
set_target_properties(mate PROPERTIES
  OUTPUT_NAME mate
  EXPORT_NAME mate
  VERSION ${PROJECT_VERSION}
  SOVERSION ${PROJECT_VERSION_MAJOR}.${PROJECT_VERSION_MINOR}
  LIBRARY_OUTPUT_DIRECTORY ${PROJECT_BINARY_DIR}/lib)
# run_program.cpp is the `mate` program's entry (mate::cli::run_program), here so that
# `python -m mate` runs the same program in the interpreter's process.
target_include_directories(mate PRIVATE ${PROJECT_SOURCE_DIR}/src ${PROJECT_BINARY_DIR}/src/cli)
target_link_libraries(mate PRIVATE CLI11::CLI11 fmt::fmt)
# Calls between libmate.so's own functions bound inside it when it is linked, not through its
# PLT at run time (a downstream program's logged call makes dozens of them: ~5% of a level-3
# call, bench_log_records_shared against bench_log_records). Functions only: data (the one
# registry, sink and guard a process must share) stays bound as usual.
target_link_options(mate PRIVATE -Wl,-Bsymbolic-functions)
