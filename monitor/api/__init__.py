"""The HTTP API (aiohttp): ratings, webhook management, health and metrics."""
