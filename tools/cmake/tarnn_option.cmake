# tarnn_option(NAME HELP CONDITION...): tests/tools/option_test.sh checks it.
# option(NAME HELP) that defaults to ON where the condition after HELP holds (what it needs was
# found), OFF elsewhere; -DNAME=ON/OFF overrides either way. A value this macro chose is checked
# again at every configure (pybind11 installed after a first configure turns the module on); a
# value given with -D that differs from what was found stays as given.
macro(tarnn_option name help)
  if(${ARGN})
    set(_tarnn_found ON)
  else()
    set(_tarnn_found OFF)
  endif()
  if(DEFINED CACHE{${name}} AND DEFINED CACHE{TARNN_FOUND_${name}}
     AND "$CACHE{${name}}" STREQUAL "$CACHE{TARNN_FOUND_${name}}")
    set(${name} ${_tarnn_found} CACHE BOOL "${help}" FORCE)
  else()
    option(${name} "${help}" ${_tarnn_found})
  endif()
  set(TARNN_FOUND_${name} ${_tarnn_found} CACHE INTERNAL "what tarnn_option found for ${name}")
endmacro()
