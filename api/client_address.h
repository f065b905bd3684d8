// The client address of a request behind reverse proxies (issue 25).
//
// eq-api counts sign-ins and registrations per client address. Behind the
// TLS proxy that Secure cookies need, the TCP peer is the proxy, and a limit
// per peer would be one limit for everybody. With EQ_TRUSTED_PROXIES set,
// a request whose peer is in those ranges is taken to come from the address
// the proxies recorded: the right-most address of X-Forwarded-For (or, when
// no X-Forwarded-For header is present, of Forwarded's for=) that is not
// itself a trusted proxy. Addresses left of it were written by the client or
// by proxies we do not know, so they are never believed; from any other peer
// both headers are ignored altogether.
//
// Pure functions, any thread.
#pragma once

#include <string>
#include <vector>

#include "common/http_server.h"
#include "common/netaddr.h"

namespace eq::api {

// The request's client address, raw bytes like HttpRequest::client (4 for
// IPv4, an IPv4-mapped IPv6 address included, or 16; empty if unknown).
std::string clientAddress(const http::HttpRequest& req, const net::CidrSet& trusted);

// The hops the proxies recorded, left (farthest) to right (nearest), as raw
// bytes; an entry that is not an address ("unknown", an obfuscated
// identifier, garbage) is an empty string. X-Forwarded-For when the request
// has one (all of its header lines, in order), else Forwarded.
std::vector<std::string> forwardedHops(const http::HttpRequest& req);

// "203.0.113.7", "2001:db8::1"; empty for an empty or malformed address.
std::string addressText(const std::string& raw);

}  // namespace eq::api
