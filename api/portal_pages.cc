// The developer center's page and assets (docs/contract.md §9): one HTML page, its
// script and its style sheet, compiled into the binary (cmake/embed.cmake)
// from portal/. Nothing is loaded from another origin; the page's
// Content-Security-Policy says so to the browser as well.
#include "api/handlers.h"
#include "common/embedded.h"

namespace eq::api {

namespace {

struct Asset {
  std::string_view path;          // the URL path
  std::string_view file;          // the embedded file
  std::string_view content_type;
};

constexpr Asset kAssets[] = {
    {"/portal/", "portal/index.html", "text/html; charset=utf-8"},
    {"/portal/app.js", "portal/app.js", "text/javascript; charset=utf-8"},
    {"/portal/style.css", "portal/style.css", "text/css; charset=utf-8"},
    {"/portal/favicon.svg", "portal/favicon.svg", "image/svg+xml"},
};

}  // namespace

void ApiService::addPortalHeaders(HttpResponse& r) {
  // No inline script, nothing from elsewhere, never framed (clickjacking).
  r.headers.emplace_back("Content-Security-Policy",
                         "default-src 'self'; frame-ancestors 'none'; base-uri 'none'; "
                         "form-action 'self'");
  r.headers.emplace_back("X-Frame-Options", "DENY");
  r.headers.emplace_back("Referrer-Policy", "same-origin");
  r.headers.emplace_back("X-Content-Type-Options", "nosniff");
}

void ApiService::portalRedirect(const CallPtr& c) {
  HttpResponse r;
  r.status = 302;
  r.headers.emplace_back("Location", "/portal/");
  r.headers.emplace_back("Content-Type", "text/plain; charset=utf-8");
  r.body = "see /portal/\n";
  finish(c->info, c->res, std::move(r));
}

void ApiService::portalAsset(const CallPtr& c) {
  for (const Asset& a : kAssets) {
    if (a.path != c->req.path) continue;
    HttpResponse r;
    r.headers.emplace_back("Content-Type", std::string(a.content_type));
    // Assets change with the binary: revalidate rather than cache blindly.
    r.headers.emplace_back("Cache-Control", "no-cache");
    addPortalHeaders(r);
    r.body = std::string(embedded::file(a.file));
    finish(c->info, c->res, std::move(r));
    return;
  }
  sendError(c->info, c->res, 404, "not found: no route " + c->req.path);
}

}  // namespace eq::api
