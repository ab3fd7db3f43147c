"""A stand-in of a driver's py4j view for the tests that ask whether its JVM has Delta's classes
(`optimizer.table.delta_engine.delta_classes`): the two ways py4j fails such a lookup."""

from __future__ import annotations

from types import SimpleNamespace

from py4j.protocol import Py4JError, Py4JJavaError


def class_not_found() -> Py4JJavaError:
    """What py4j raises when the JVM answers with ClassNotFoundException: the classes are not there."""
    return Py4JJavaError("An error occurred", SimpleNamespace(_target_id="o1", _gateway_client=None))


def no_answer() -> Py4JError:
    """What py4j raises when the gateway does not answer (the driver died): nothing is known."""
    return Py4JError("Answer from Java side is empty")


def jvm_failing_lookups(error: Exception) -> SimpleNamespace:
    """A py4j JVM view whose ``Class.forName`` raises `error`."""

    def for_name(*_: object) -> None:
        raise error

    thread = SimpleNamespace(currentThread=lambda: SimpleNamespace(getContextClassLoader=lambda: None))
    return SimpleNamespace(
        java=SimpleNamespace(lang=SimpleNamespace(Class=SimpleNamespace(forName=for_name), Thread=thread))
    )
