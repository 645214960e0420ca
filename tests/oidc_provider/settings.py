"""Django settings of the test provider, from the environment ``provider.py`` sets: its data
directory (an SQLite database and the RSA key that signs ID tokens), its issuer and the
lifetimes of its tokens."""

from __future__ import annotations

import os
from pathlib import Path

DATA = Path(os.environ["OIDC_PROVIDER_DIR"])
ISSUER = os.environ["OIDC_PROVIDER_ISSUER"]

SECRET_KEY = "test-provider-only"
DEBUG = False
ALLOWED_HOSTS = ["127.0.0.1", "localhost"]
ROOT_URLCONF = "tests.oidc_provider.urls"
INSTALLED_APPS = [
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "oauth2_provider",
]
MIDDLEWARE = [
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
]
TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [str(Path(__file__).parent / "templates")],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
            ]
        },
    }
]
DATABASES = {"default": {"ENGINE": "django.db.backends.sqlite3", "NAME": str(DATA / "db.sqlite3")}}
DEFAULT_AUTO_FIELD = "django.db.models.AutoField"
PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]  # fast, test users only
LOGIN_URL = "/accounts/login/"
USE_TZ = True
OAUTH2_PROVIDER = {
    "OIDC_ENABLED": True,
    "OIDC_RSA_PRIVATE_KEY": (DATA / "key.pem").read_text(),
    "OIDC_ISS_ENDPOINT": ISSUER,
    "PKCE_REQUIRED": True,
    "OAUTH2_VALIDATOR_CLASS": "tests.oidc_provider.validator.ClaimsValidator",
    "SCOPES": {
        "openid": "who you are",
        "profile": "your name",
        "email": "your email",
        "groups": "your groups",
        "introspection": "introspect tokens",
    },
    "OAUTH_DEVICE_VERIFICATION_URI": f"{ISSUER}/device/",
    "DEVICE_FLOW_INTERVAL": 1,
    "ACCESS_TOKEN_EXPIRE_SECONDS": int(os.environ.get("OIDC_PROVIDER_TOKEN_SECONDS", "600")),
    "ID_TOKEN_EXPIRE_SECONDS": int(os.environ.get("OIDC_PROVIDER_TOKEN_SECONDS", "600")),
}
