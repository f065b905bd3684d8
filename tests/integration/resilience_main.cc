// The one translation unit that defines the fault-injection test module
// (ctest `resilience`, labels integration and fault).
#define BOOST_TEST_MODULE eq_resilience
#include <boost/test/unit_test.hpp>
