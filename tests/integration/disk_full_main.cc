// The one translation unit that defines the disk-full test module (ctest
// `disk_full`, labels integration and fault).
#define BOOST_TEST_MODULE eq_disk_full
#include <boost/test/unit_test.hpp>
