# Compiles probe.c in one module's compile context and checks the verdict:
#   -DCC=compiler -DSOURCE=probe.c -DMODULE_DIR=src/<module>
#   -DINCLUDES=list -DDEFINES=list -DOPTIONS=list
#   -DHEADER=<x.h>|"x.h" -DEXPECT=refused|allowed
# "refused" passes only when the compiler stops because it cannot find that
# very header (any other error fails the test: it would prove nothing).
set(args -fsyntax-only -iquote ${MODULE_DIR})
foreach(d ${INCLUDES})
  list(APPEND args -I${d})
endforeach()
foreach(d ${DEFINES})
  list(APPEND args -D${d})
endforeach()
list(APPEND args ${OPTIONS} "-DPROBE_HEADER=${HEADER}" ${SOURCE})
execute_process(COMMAND ${CC} ${args} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
string(REGEX REPLACE "^[<\"](.*)[>\"]$" "\\1" name "${HEADER}")
if(EXPECT STREQUAL "allowed")
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "${HEADER} should compile in ${MODULE_DIR} but did not:\n${err}")
  endif()
  message(STATUS "${MODULE_DIR} may include ${HEADER}")
else()
  string(FIND "${err}" "${name}: No such file or directory" gcc_says)
  string(FIND "${err}" "'${name}' file not found" clang_says)
  if(rc EQUAL 0)
    message(FATAL_ERROR "the build let ${MODULE_DIR} include ${HEADER}: a layer violation compiles")
  elseif(gcc_says EQUAL -1 AND clang_says EQUAL -1)
    message(FATAL_ERROR "${HEADER} in ${MODULE_DIR} failed for another reason:\n${err}")
  endif()
  message(STATUS "${MODULE_DIR} cannot include ${HEADER}: ${err}")
endif()
