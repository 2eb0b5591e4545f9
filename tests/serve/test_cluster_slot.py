"""Where a new application may join the Serve instance already running on a cluster: the
decision read from the controller's details, each refusal one line that says what to change.
(``tests/serve/test_cluster.py`` shows a refusal through the CLI on a real cluster.)"""

from __future__ import annotations

import pytest

from rlformer.serve.launch import Endpoint, ServeStartError, _check_cluster_slot

RUNNING = {
    "http_options": {"host": "127.0.0.1", "port": 8123},
    "applications": {"rlformer": {"route_prefix": "/"}, "b": {"route_prefix": "/b"}},
}


def test_a_free_name_and_route_on_the_running_port_join() -> None:
    assert _check_cluster_slot(RUNNING, "c", "/c", 8123) == Endpoint("127.0.0.1", 8123, "/c")


def test_a_serve_without_details_listens_on_its_default_port() -> None:
    assert _check_cluster_slot({}, "rlformer", "/", 8000) == Endpoint("127.0.0.1", 8000, "/")


@pytest.mark.parametrize(
    ("name", "route", "port", "says"),
    [
        ("rlformer", "/x", 8123, "an application named 'rlformer' already runs"),
        ("b", "/x", 8123, "choose another --name"),
        ("c", "/b", 8123, "route /b is served by the application 'b'"),
        ("c", "/", 8123, "choose another --route-prefix"),
        ("c", "/c", 9000, "already listens on port 8123 (one HTTP port per cluster): pass --port"),
    ],
)
def test_a_taken_name_a_taken_route_or_another_port_is_refused_in_one_line(
    name: str, route: str, port: int, says: str
) -> None:
    with pytest.raises(ServeStartError) as refusal:
        _check_cluster_slot(RUNNING, name, route, port)
    assert says in str(refusal.value) and "\n" not in str(refusal.value)
