// The one translation unit that defines the broker trust test module (ctest
// `broker_trust`, label integration).
#define BOOST_TEST_MODULE eq_broker_trust
#include <boost/test/unit_test.hpp>
