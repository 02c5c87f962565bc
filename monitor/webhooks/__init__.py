"""Webhooks: URL safety, signing, secrets at rest, the sender and the dispatcher."""
