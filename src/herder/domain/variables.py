"""Environment variable names: which a job may set at all, and which change how a program
starts — the dynamic loader, a shell, an interpreter, or a tool the job may call — so that
whoever sets one chooses code to run inside the job, next to its secrets.

A run-time override (a run's or schedule's ``env``, a workflow's parameters) may not name a
startup variable unless the job itself sets it; a job's own parameter of such a name must
be constrained (docs/isolation.md, "Variables that change how a program starts"). Names
compare without regard to case: some programs read the lower-case form (``npm_config_*``).
"""

from __future__ import annotations

import re

_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
RESERVED_PREFIX = "HERDER_"  # Herder's own variables (HERDER_RUN_ID, HERDER_OUTPUT, …)

# Each name or prefix with the program that reads it at start (docs/isolation.md has why).
STARTUP_VARIABLES = frozenset(
    {
        # glibc's own list of variables it drops for set-uid programs (unsecvars.h)
        "GCONV_PATH", "GETCONF_DIR", "GLIBC_TUNABLES", "HOSTALIASES", "LOCALDOMAIN",
        "LOCPATH", "NIS_PATH", "NLSPATH", "RESOLV_HOST_CONF", "RES_OPTIONS", "TMPDIR",
        "TZDIR",
        # which program a name runs, and the start-up files read from a home
        "PATH", "HOME", "SHELL", "XDG_CONFIG_HOME", "XDG_CONFIG_DIRS",
        # shells: files sourced, options, and code run before commands or as prompts
        "BASH_ENV", "ENV", "SHELLOPTS", "BASHOPTS", "PS4", "PROMPT_COMMAND", "IFS",
        "CDPATH", "GLOBIGNORE", "ZDOTDIR",
        # commands other programs run for you (Python's webbrowser, git, man, less, sudo)
        "BROWSER", "PAGER", "EDITOR", "VISUAL", "MANPAGER", "LESSOPEN", "LESSCLOSE",
        "SSH_ASKPASS", "SUDO_ASKPASS",
        # Java, Tcl, Go, OpenSSL (a configuration file loads engines: native code)
        "JAVA_TOOL_OPTIONS", "_JAVA_OPTIONS", "JDK_JAVA_OPTIONS", "CLASSPATH", "JAVA_HOME",
        "MAVEN_OPTS", "GRADLE_OPTS", "TCLLIBPATH", "GOFLAGS", "GOROOT", "GOPATH",
        "GOTOOLCHAIN", "GOPROXY", "OPENSSL_CONF", "OPENSSL_ENGINES", "OPENSSL_MODULES",
        "SSLKEYLOGFILE", "PHPRC", "PHP_INI_SCAN_DIR",
    }
)  # fmt: skip
STARTUP_PREFIXES = (
    "LD_",  # the dynamic loader: LD_PRELOAD, LD_LIBRARY_PATH, LD_AUDIT, …
    "MALLOC_",  # glibc's allocator (MALLOC_TRACE writes a file; tunables)
    "PYTHON",  # PYTHONPATH, PYTHONSTARTUP, PYTHONWARNINGS, PYTHONHOME, PYTHONBREAKPOINT, …
    "PERL",  # PERL5OPT, PERL5LIB, PERLLIB, PERL5DB, …
    "RUBY",  # RUBYOPT, RUBYLIB
    "GEM_",  # where Ruby's require looks
    "BUNDLE_",
    "NODE_",  # NODE_OPTIONS (--require), NODE_PATH
    "NPM_CONFIG_",
    "PIP_",  # PIP_INDEX_URL: what pip installs
    "LUA_",  # LUA_INIT runs code; LUA_PATH, LUA_CPATH
    "R_",  # R_PROFILE, R_PROFILE_USER, R_ENVIRON, R_LIBS
    "GIT_",  # GIT_SSH_COMMAND, GIT_EXTERNAL_DIFF, GIT_CONFIG_* (any setting, core.pager …)
    "DOTNET_",  # DOTNET_STARTUP_HOOKS
    "COMPLUS_",
    "CORECLR_",  # CORECLR_PROFILER_PATH: a native library loaded at start
)


def variable_name_problem(name: str) -> str | None:
    """Why ``name`` cannot be an environment variable a job sets, or None."""
    if not _NAME.match(name):
        return f"{name[:128]!r} is not a valid environment variable name (an identifier)"
    if name.startswith(RESERVED_PREFIX):
        return f"{name!r}: the {RESERVED_PREFIX} prefix is reserved for Herder's own variables"
    return None


def changes_startup(name: str) -> bool:
    """Does this variable change how a program starts (the loader, a shell, an
    interpreter, a tool it calls)?"""
    upper = name.upper()
    return upper in STARTUP_VARIABLES or upper.startswith(STARTUP_PREFIXES)
