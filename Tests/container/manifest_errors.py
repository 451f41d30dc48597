"""How the manifest checks fail: a CheckError whose message says what is wrong and where."""


class CheckError(Exception):
    """A problem in the manifests: the message says what and where."""


def check(condition, message):
    if not condition:
        raise CheckError(message)
