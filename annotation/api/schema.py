from drf_spectacular.openapi import AutoSchema


class ChorusAutoSchema(AutoSchema):
    """Names a serializer nested in its API class (``NextTaskApi.OutputSerializer``) after both
    (``NextTaskApiOutput``), so every API can call its own serializers Input and Output."""

    def get_serializer_name(self, serializer, direction):
        return type(serializer).__qualname__.replace(".", "")
