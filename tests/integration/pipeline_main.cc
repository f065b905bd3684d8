// The one translation unit that defines the pipeline fault-injection module
// (ctest `pipeline`, labels integration and fault).
#define BOOST_TEST_MODULE eq_pipeline
#include <boost/test/unit_test.hpp>
