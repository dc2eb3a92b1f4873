// A shared object that is not a kiwi plugin at all (no kiwi_abi_version).
extern "C" __attribute__((visibility("default"))) int some_other_library_function() {
  return 7;
}
