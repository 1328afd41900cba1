# CHORUS_FUZZ=ON: every target is compiled with libFuzzer's coverage instrumentation plus ASan and
# UBSan, so that the code the fuzz targets of test/fuzz call is both guided and checked. The fuzz
# targets themselves link libFuzzer's main (test/fuzz/CMakeLists.txt).
if(NOT CHORUS_FUZZ)
  return()
endif()
if(NOT CMAKE_CXX_COMPILER_ID STREQUAL "Clang")
  message(FATAL_ERROR "CHORUS_FUZZ=ON needs clang (libFuzzer): configure with CC=clang CXX=clang++")
endif()
if(NOT CHORUS_SANITIZE STREQUAL "")
  message(FATAL_ERROR "CHORUS_FUZZ=ON brings its own sanitizers: leave CHORUS_SANITIZE empty")
endif()
add_compile_options(-fsanitize=fuzzer-no-link,address,undefined -fno-omit-frame-pointer
  -fno-sanitize-recover=undefined)
add_link_options(-fsanitize=address,undefined)
message(STATUS "chorus: libFuzzer targets with ASan+UBSan")
