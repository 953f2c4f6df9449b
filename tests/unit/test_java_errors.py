"""How the Java client's errors are worded (``adapters.kafka.java_client.worded``),
on stand-ins for the Java exceptions py4j hands over: a class, its
superclasses and a message."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from adapters.kafka.java_client import JAVA_ERRORS, class_names, worded


class JavaClass:
    def __init__(self, name: str, superclass: JavaClass | None = None) -> None:
        self.name, self.superclass = name, superclass

    def getName(self) -> str:  # noqa: N802 - Java's name
        return self.name

    def getSuperclass(self) -> JavaClass | None:  # noqa: N802
        return self.superclass


class JavaException:
    def __init__(self, kind: JavaClass, message: str) -> None:
        self.kind, self.message = kind, message

    def getClass(self) -> JavaClass:  # noqa: N802
        return self.kind

    def getMessage(self) -> str:  # noqa: N802
        return self.message

    def getCause(self) -> None:  # noqa: N802
        return None


THROWABLE = JavaClass("java.lang.Throwable")
KAFKA = JavaClass("org.apache.kafka.common.KafkaException", JavaClass("java.lang.RuntimeException", THROWABLE))
AUTHENTICATION = JavaClass(JAVA_ERRORS + "AuthenticationException", JavaClass(JAVA_ERRORS + "ApiException", KAFKA))
SASL = JavaClass(JAVA_ERRORS + "SaslAuthenticationException", AUTHENTICATION)
ILLEGAL_SASL_STATE = JavaClass(JAVA_ERRORS + "IllegalSaslStateException", AUTHENTICATION)
UNKNOWN = JavaClass(JAVA_ERRORS + "UnknownServerException", JavaClass(JAVA_ERRORS + "ApiException", KAFKA))


def error(kind: JavaClass, message: str = "refused") -> SimpleNamespace:
    return SimpleNamespace(java_exception=JavaException(kind, message))


def test_the_class_names_run_from_the_class_to_throwable():
    assert class_names(JavaException(ILLEGAL_SASL_STATE, "")) == [
        JAVA_ERRORS + "IllegalSaslStateException", JAVA_ERRORS + "AuthenticationException",
        JAVA_ERRORS + "ApiException", "org.apache.kafka.common.KafkaException", "java.lang.RuntimeException",
        "java.lang.Throwable"]


@pytest.mark.parametrize(("kind", "words", "lasting", "why"), [
    (SASL, "the cluster refused Gapwatch's SASL login", True, "named itself"),
    (ILLEGAL_SASL_STATE, "(authentication failed)", False,
     "a subclass of AuthenticationException not named: said as its nearest named class (seen when a revoked "
     "OAuth client re-authenticated: 'Unexpected handshake request ..., enabled mechanisms are []')"),
    (AUTHENTICATION, "(authentication failed)", False, "the base class: asked again"),
])
def test_a_refused_login_is_said_as_one_whatever_subclass_says_it(kind, words, lasting, why):
    text, refused = worded(error(kind), group_id=None, timeout_ms=4000)
    assert text.startswith(f"login refused: {kind.name.rsplit('.', 1)[-1]}: refused"), why
    assert words in text and refused is lasting, why


def test_an_error_that_is_no_refusal_is_said_as_it_is():
    assert worded(error(UNKNOWN, "boom"), group_id=None, timeout_ms=4000) == ("UnknownServerException: boom", False)
