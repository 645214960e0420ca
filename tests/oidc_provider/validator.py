"""The claims Herder maps people by: ``groups`` (the Django groups' names), ``email`` and
``preferred_username``, in the ID token and at the userinfo endpoint."""

from __future__ import annotations

from typing import Any

from oauth2_provider.oauth2_validators import OAuth2Validator  # type: ignore[import-untyped]


class ClaimsValidator(OAuth2Validator):  # type: ignore[misc]
    oidc_claim_scope = None  # every claim, whatever the scopes

    def get_additional_claims(self, request: Any) -> dict[str, Any]:
        user = request.user
        return {
            "preferred_username": user.username,
            "email": user.email,
            "groups": sorted(group.name for group in user.groups.all()),
        }
