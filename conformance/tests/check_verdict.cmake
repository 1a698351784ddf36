# Runs nxrt-conformance on one plugin and asserts its verdicts.
#   -DRUNNER= -DPLUGIN= -DSUITES= -DEXIT=0|1 -DOUT=prefix -DARGS=list [-DPYTHON=python3: strict UTF-8 JSON check]
#   -DEXPECT="suite/check|status|message-regex;..."
# Each EXPECT names a check that must be in the JSON report with that status
# and a message matching the regex (empty regex: any message). EXIT is the
# expected exit status; the last stdout line must be "N passed, N failed, N skipped".
foreach(v RUNNER PLUGIN SUITES EXIT OUT)
  if(NOT DEFINED ${v})
    message(FATAL_ERROR "check_verdict.cmake: -D${v}= is required")
  endif()
endforeach()

# Lists arrive joined with "@@" (a ";" would not survive add_test).
string(REPLACE "@@" ";" ARGS "${ARGS}")
string(REPLACE "@@" ";" EXPECT "${EXPECT}")
set(json ${OUT}.json)
file(REMOVE ${json})
execute_process(
  COMMAND ${RUNNER} --plugin ${PLUGIN} --suite ${SUITES} ${ARGS}
          --report-json ${json} --report-md ${OUT}.md --report-html ${OUT}.html
  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
message("${out}")
if(NOT EXISTS ${json})
  message(FATAL_ERROR "no JSON report (exit ${rc}); stderr:\n${err}")
endif()

# The report must parse as strict UTF-8 JSON whatever the plugin said (issue 14); the
# Markdown and HTML reports must be valid UTF-8.
if(PYTHON)
  execute_process(
    COMMAND ${PYTHON} -c "import json,sys\njson.loads(open(sys.argv[1],'rb').read().decode('utf-8'))\nfor f in sys.argv[2:]: open(f,'rb').read().decode('utf-8')"
            ${json} ${OUT}.md ${OUT}.html
    RESULT_VARIABLE prc ERROR_VARIABLE perr)
  if(NOT prc EQUAL 0)
    message(FATAL_ERROR "the reports are not valid UTF-8 JSON / UTF-8:\n${perr}")
  endif()
endif()

string(STRIP "${out}" stripped)
string(REGEX MATCH "[^\n]*$" last "${stripped}")
if(NOT last MATCHES "^[0-9]+ passed, [0-9]+ failed, [0-9]+ skipped$")
  message(FATAL_ERROR "last line is not 'N passed, N failed, N skipped': '${last}'")
endif()
if(NOT rc STREQUAL EXIT)
  message(FATAL_ERROR "exit status ${rc}, expected ${EXIT}\nstderr:\n${err}")
endif()

file(READ ${json} report)
string(JSON n LENGTH "${report}" checks)
set(failed_expectations "")
foreach(expect IN LISTS EXPECT)
  string(REPLACE "|" ";" parts "${expect}")
  list(LENGTH parts np)
  list(GET parts 0 id)
  list(GET parts 1 want_status)
  set(want_msg "")
  if(np GREATER 2)
    list(GET parts 2 want_msg)
  endif()
  # suite/check, where the check may hold '/' itself (models/mixed/mlp).
  string(FIND "${id}" "/" slash)
  string(SUBSTRING "${id}" 0 ${slash} want_suite)
  math(EXPR check_at "${slash} + 1")
  string(SUBSTRING "${id}" ${check_at} -1 want_check)
  set(found FALSE)
  math(EXPR last_index "${n} - 1")
  foreach(i RANGE ${last_index})
    string(JSON suite GET "${report}" checks ${i} suite)
    string(JSON check GET "${report}" checks ${i} check)
    if(suite STREQUAL want_suite AND check STREQUAL want_check)
      set(found TRUE)
      string(JSON status GET "${report}" checks ${i} status)
      string(JSON msg GET "${report}" checks ${i} message)
      if(NOT status STREQUAL want_status)
        string(APPEND failed_expectations "${id}: status '${status}' (expected '${want_status}'), message '${msg}'\n")
      elseif(NOT want_msg STREQUAL "" AND NOT msg MATCHES "${want_msg}")
        string(APPEND failed_expectations "${id}: message '${msg}' does not match '${want_msg}'\n")
      endif()
      break()
    endif()
  endforeach()
  if(NOT found)
    string(APPEND failed_expectations "${id}: not in the report\n")
  endif()
endforeach()
if(failed_expectations)
  message(FATAL_ERROR "unexpected verdicts:\n${failed_expectations}")
endif()
message(STATUS "verdicts as expected (exit ${rc})")
