// The one translation unit that defines the two-host module (ctest
// `two_hosts`, labels integration and postgres).
#define BOOST_TEST_MODULE eq_two_hosts
#include <boost/test/unit_test.hpp>
