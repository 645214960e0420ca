"""The dashboard: a single-page app of our own (plain ES modules and one stylesheet, no build
step, no third-party code) served at ``/`` with its files under ``/ui/``.

The page holds no data of its own: it signs in with an API key kept in the tab's
sessionStorage and calls /v1 with it as a bearer token, so it sees exactly what the key may
see; or, where single sign-on is set up, through the OpenID provider, after which the
server's session cookie (HttpOnly, SameSite=Lax) admits it and every change carries the
session's CSRF token and this origin (``api.auth``). A strict Content-Security-Policy allows
only this origin's scripts and styles, and the scripts put every piece of data into the page
as text.
"""

from __future__ import annotations

from herder.api.dashboard.routes import router

__all__ = ["router"]
