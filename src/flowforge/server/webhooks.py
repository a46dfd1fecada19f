"""Webhooks, as the server knows them: the signing, the SSRF guard and the
delivery with retries live in the service layer (`flowforge.service.webhooks`),
because a worker that finishes a pool run delivers its webhook too."""

from flowforge.service.pool import deliver_owed
from flowforge.service.webhooks import (SIGNATURE_HEADER, TIMESTAMP_HEADER, deliver_webhook,
                                        sign, verify, webhook_payload, webhook_refusal)

__all__ = ["sign", "verify", "webhook_payload", "deliver_webhook", "webhook_refusal",
           "deliver_owed", "SIGNATURE_HEADER", "TIMESTAMP_HEADER"]
