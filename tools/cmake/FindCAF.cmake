# Debian's libcaf-dev (CAF 0.17) ships neither a CMake config nor a pkg-config file.
# This module finds caf_core and exposes it as the imported target CAF::core.
find_path(CAF_INCLUDE_DIR caf/all.hpp)
find_library(CAF_CORE_LIBRARY caf_core)
include(FindPackageHandleStandardArgs)
find_package_handle_standard_args(CAF REQUIRED_VARS CAF_CORE_LIBRARY CAF_INCLUDE_DIR)
if(CAF_FOUND AND NOT TARGET CAF::core)
  add_library(CAF::core SHARED IMPORTED)
  set_target_properties(CAF::core PROPERTIES
    IMPORTED_LOCATION "${CAF_CORE_LIBRARY}"
    INTERFACE_INCLUDE_DIRECTORIES "${CAF_INCLUDE_DIR}")
  find_package(Threads REQUIRED)
  set_property(TARGET CAF::core APPEND PROPERTY INTERFACE_LINK_LIBRARIES Threads::Threads)
endif()
