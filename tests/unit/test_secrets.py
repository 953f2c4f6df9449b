from groups.domain.secrets import secret_redact


def test_it_replaces_every_occurrence_of_the_secret():
    assert secret_redact("auth failed for s3cret (password=s3cret)", "s3cret") == "auth failed for *** (password=***)"


def test_it_leaves_text_alone_without_a_secret():
    assert secret_redact("connection refused", "", None) == "connection refused"


def test_it_hides_a_longer_secret_whole_even_when_it_contains_a_shorter_one():
    # "pass" first would leave "***word" and reveal the shape of the longer one.
    assert secret_redact("password and pass", "pass", "password") == "*** and ***"


def test_it_orders_secrets_by_length_not_alphabet():
    # "zz" sorts after "azzb" alphabetically; replaced first it would leave "a***b".
    assert secret_redact("pw=azzb", "zz", "azzb") == "pw=***"
