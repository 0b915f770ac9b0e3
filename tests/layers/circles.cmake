# No circle among one module's files: file A depends on file B when A's
# object refers to a symbol B's object defines (it calls B's functions or
# reads B's data, through whatever header declared them). A module whose
# files call each other in a circle has no bottom layer to read first, to
# test alone or to lift out (issue 36: src/client's client.c called the held
# leases' renewal group to free it, the group called back into client.c).
#   -DNM=nm -DMODULE=name -DOBJECTS=<the module's object files, ;-list>
# Every symbol is read from the objects the build made: the verdict is on
# what links, not on what a header happens to declare.
set(defines "")
set(nodes "")
foreach(obj ${OBJECTS})
  get_filename_component(name ${obj} NAME)
  string(REGEX REPLACE "\\.c\\.o$|\\.o$" "" name "${name}")
  list(APPEND nodes ${name})
  execute_process(COMMAND ${NM} -P ${obj} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "${NM} ${obj} failed: ${err}")
  endif()
  string(REPLACE "\n" ";" lines "${out}")
  set(undef_${name} "")
  foreach(l ${lines})
    # nm -P: "symbol type [value size]"; upper-case types are global
    if(l MATCHES "^([A-Za-z_][A-Za-z0-9_.]*) ([A-Z])")
      set(sym ${CMAKE_MATCH_1})
      if(CMAKE_MATCH_2 STREQUAL "U")
        list(APPEND undef_${name} ${sym})
      elseif(NOT CMAKE_MATCH_2 STREQUAL "W" AND NOT CMAKE_MATCH_2 STREQUAL "V")
        set(def_${sym} ${name})
      endif()
    endif()
  endforeach()
endforeach()

# the edges: a file's references resolved by another file of the module
foreach(n ${nodes})
  set(edges_${n} "")
  foreach(sym ${undef_${n}})
    if(DEFINED def_${sym} AND NOT def_${sym} STREQUAL n)
      list(APPEND edges_${n} ${def_${sym}})
      set(why_${n}_${def_${sym}} ${sym})
    endif()
  endforeach()
  list(REMOVE_DUPLICATES edges_${n})
endforeach()

# Peel the files that depend on no file left; what cannot be peeled lies on
# (or hangs below) a circle.
set(left ${nodes})
set(peeled TRUE)
while(peeled)
  set(peeled FALSE)
  foreach(n ${left})
    set(blocked FALSE)
    foreach(m ${edges_${n}})
      list(FIND left ${m} at)
      if(NOT at EQUAL -1)
        set(blocked TRUE)
        break()
      endif()
    endforeach()
    if(NOT blocked)
      list(REMOVE_ITEM left ${n})
      set(peeled TRUE)
    endif()
  endforeach()
endwhile()

if(left)
  set(text "")
  foreach(n ${left})
    foreach(m ${edges_${n}})
      list(FIND left ${m} at)
      if(NOT at EQUAL -1)
        string(APPEND text "\n  ${n} -> ${m} (${why_${n}_${m}})")
      endif()
    endforeach()
  endforeach()
  message(FATAL_ERROR "files of ${MODULE} that depend on each other in a circle:${text}")
endif()
list(LENGTH nodes count)
message(STATUS "${MODULE}: ${count} files, no circle among them")
