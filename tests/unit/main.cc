// The one translation unit that defines the unit-test module (and main).
#define BOOST_TEST_MODULE eq_unit
#include <boost/test/unit_test.hpp>
