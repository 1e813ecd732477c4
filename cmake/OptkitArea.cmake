# The library's areas as CMake targets (see lib/CMakeLists.txt for the graph and why).
#
# optkit_area(NAME DEPENDS <area>... SOURCES <file>...) adds optkit_NAME from lib/NAME/<file>s.
# Its headers are published through an include root of its own, build/include/NAME, holding one
# symbolic link NAME → lib/NAME: "NAME/x.hpp" resolves only for targets that link optkit_NAME.
# An area may depend only on areas declared before it, so the declared graph cannot have a cycle.

function(optkit_area name)
  cmake_parse_arguments(PARSE_ARGV 1 AREA "" "" "DEPENDS;SOURCES")
  set(root ${CMAKE_BINARY_DIR}/include/${name})
  file(MAKE_DIRECTORY ${root})
  file(CREATE_LINK ${CMAKE_CURRENT_SOURCE_DIR}/${name} ${root}/${name} SYMBOLIC)
  list(TRANSFORM AREA_SOURCES PREPEND ${name}/)
  add_library(optkit_${name} STATIC ${AREA_SOURCES})
  target_include_directories(optkit_${name} PUBLIC ${root})
  target_compile_options(optkit_${name} PRIVATE ${OPTKIT_WARNINGS})
  optkit_use_precompiled_headers(optkit_${name} SMALL_FILES)
  optkit_use_unity_build(optkit_${name})
  target_link_libraries(optkit_${name} PUBLIC optkit_thirdparty)
  foreach(dep IN LISTS AREA_DEPENDS)
    if(NOT TARGET optkit_${dep})
      message(FATAL_ERROR "lib/${name} depends on '${dep}', which is not an area declared before it: "
                          "declare areas bottom-up in lib/CMakeLists.txt (a later area would make a cycle)")
    endif()
    target_link_libraries(optkit_${name} PUBLIC optkit_${dep})
  endforeach()
  set_property(GLOBAL APPEND PROPERTY OPTKIT_AREAS ${name})
  set_property(GLOBAL PROPERTY OPTKIT_AREA_DEPENDS_${name} "${AREA_DEPENDS}")
endfunction()

# Writes the declared graph, one "area: dep dep ..." line per area with its dependencies closed
# transitively (what the area can see), to build/area_graph.txt for cmake/PrintAreaGraph.cmake.
function(optkit_write_area_graph)
  get_property(areas GLOBAL PROPERTY OPTKIT_AREAS)
  set(text "")
  foreach(area IN LISTS areas)
    get_property(direct GLOBAL PROPERTY OPTKIT_AREA_DEPENDS_${area})
    set(seen "")
    set(queue ${direct})
    while(queue)
      list(POP_FRONT queue dep)
      if(NOT dep IN_LIST seen)
        list(APPEND seen ${dep})
        get_property(next GLOBAL PROPERTY OPTKIT_AREA_DEPENDS_${dep})
        list(APPEND queue ${next})
      endif()
    endwhile()
    list(SORT seen)
    list(JOIN seen " " seen_text)
    string(APPEND text "${area}: ${seen_text}\n")
  endforeach()
  file(WRITE ${CMAKE_BINARY_DIR}/area_graph.txt "${text}")
endfunction()
