"""Kafka API keys by their protocol names ("Produce", "InitProducerId"), from kio's index.

Fault specs and counters speak the names Kafka's own docs and logs use; the wire carries numbers.
"""

from kio.schema.index import api_key_map

API_NAMES: dict[int, str] = {
    key: "".join(part.capitalize() for part in snake.split("_"))
    for key, snake in api_key_map.items()
}
_KEYS_BY_FOLDED_NAME: dict[str, int] = {name.lower(): key for key, name in API_NAMES.items()}


def api_name(api_key: int) -> str:
    """The protocol name of `api_key`, or "Api<key>" for a key kio does not know."""
    return API_NAMES.get(api_key, f"Api{api_key}")


def parse_api_key(value: str | int) -> int:
    """An API key from its number or its name in any case ("Produce", "produce", "init_producer_id").

    Raises ValueError naming the unknown value.
    """
    if isinstance(value, int) or value.isdigit():
        key = int(value)
        if key in API_NAMES:
            return key
        raise ValueError(f"unknown API key {key}")
    folded = value.replace("_", "").lower()
    if folded in _KEYS_BY_FOLDED_NAME:
        return _KEYS_BY_FOLDED_NAME[folded]
    raise ValueError(f"unknown API name {value!r} (Kafka names such as 'Produce', 'Fetch')")
