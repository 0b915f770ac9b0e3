# No file under src/ includes a header by a path that leaves its module:
# a module's own headers are included by bare name ("pg_conn.h"), other
# modules' only through their public view ("lease/store_pg.h"). Together
# with the include paths (probe.cmake) this closes the relative way round
# (#include "../store/pg_conn.h").  -DSRC=<source tree>/src
file(GLOB_RECURSE files ${SRC}/*.c ${SRC}/*.h)
set(bad "")
foreach(f ${files})
  file(STRINGS ${f} lines REGEX "^[ \t]*#[ \t]*include[ \t]*\"")
  foreach(l ${lines})
    if(l MATCHES "\"([^\"]*)\"")
      set(path "${CMAKE_MATCH_1}")
      if(path MATCHES "/" AND NOT path MATCHES "^lease/[a-z_]+\\.h$")
        list(APPEND bad "${f}: ${l}")
      endif()
    endif()
  endforeach()
endforeach()
if(bad)
  list(JOIN bad "\n" text)
  message(FATAL_ERROR "includes that reach into another module:\n${text}")
endif()
list(LENGTH files n)
message(STATUS "${n} files under src/ include only their own folder's headers and public views")
