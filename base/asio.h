// The one way allot code includes Boost.Asio.
//
// Boost 1.74's asio/awaitable.hpp uses std::exchange without including
// <utility>, which g++ 12 no longer pulls in transitively; include it first.
#pragma once

#include <utility>

#include <boost/asio.hpp>

namespace allot {
namespace asio = boost::asio;
}  // namespace allot
