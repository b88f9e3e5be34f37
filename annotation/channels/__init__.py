"""Publishing channels: MTurk through boto3, link-based panels, and the contract every backend follows
(``annotation.channels.base``). Backends come from ``settings.CHORUS_CHANNELS`` via
``annotation.channels.registry.get_channel``."""
