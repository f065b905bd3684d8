// The one translation unit that defines the integration-test module.
#define BOOST_TEST_MODULE eq_integration
#include <boost/test/unit_test.hpp>
