# ccscope_add_fuzzer(NAME SOURCE LIBRARY...): a libFuzzer target, built only by
# clang where -fsanitize=fuzzer links (the `fuzz` preset adds ASan/UBSan and
# coverage for the libraries); elsewhere nothing.
function(ccscope_add_fuzzer name source)
  if(NOT CMAKE_CXX_COMPILER_ID MATCHES "Clang")
    return()
  endif()
  if(NOT DEFINED CCSCOPE_HAVE_LIBFUZZER)
    include(CheckCXXSourceCompiles)
    set(CMAKE_REQUIRED_FLAGS -fsanitize=fuzzer)
    check_cxx_source_compiles([[
      #include <cstddef>
      #include <cstdint>
      extern "C" int LLVMFuzzerTestOneInput(const uint8_t*, size_t) { return 0; }
    ]] CCSCOPE_HAVE_LIBFUZZER)
    unset(CMAKE_REQUIRED_FLAGS)
  endif()
  if(CCSCOPE_HAVE_LIBFUZZER)
    add_executable(${name} ${source})
    target_link_libraries(${name} PRIVATE ${ARGN})
    target_compile_options(${name} PRIVATE -fsanitize=fuzzer)
    target_link_options(${name} PRIVATE -fsanitize=fuzzer)
  endif()
endfunction()
