# mate_add_component(NAME SOURCES ... [PUBLIC_DEPS ...] [PRIVATE_DEPS ...])
# Creates the static library mate_<NAME> (alias mate::<NAME>) and adds it to mate_components,
# the list libmate.so is made of (cmake/MateSharedLibrary.cmake).
function(mate_add_component name)
  cmake_parse_arguments(C "" "" "SOURCES;PUBLIC_DEPS;PRIVATE_DEPS" ${ARGN})
  add_library(mate_${name} STATIC ${C_SOURCES})
  add_library(mate::${name} ALIAS mate_${name})
  set_target_properties(mate_${name} PROPERTIES EXPORT_NAME ${name} OUTPUT_NAME mate_${name})
  target_include_directories(mate_${name} PUBLIC
    $<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}/include>
    $<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}/src>
    $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>)
  target_link_libraries(mate_${name} PUBLIC ${C_PUBLIC_DEPS} PRIVATE ${C_PRIVATE_DEPS})
  target_link_libraries(mate_components INTERFACE mate_${name})
  set_property(GLOBAL APPEND PROPERTY MATE_COMPONENT_LIBRARIES mate_${name})
endfunction()
