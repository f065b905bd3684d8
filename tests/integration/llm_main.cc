// The one translation unit that defines the llm engine test module (ctest
// `llm`, label integration).
#define BOOST_TEST_MODULE eq_llm
#include <boost/test/unit_test.hpp>
