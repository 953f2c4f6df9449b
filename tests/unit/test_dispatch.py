"""groups enqueues tasks by name (groups.services.dispatch) because it must
not import tasks/: every name it sends has to be a task the worker registers."""

from groups.services import dispatch


def test_it_names_only_tasks_the_worker_registers():
    from controlplane.celery import app

    app.loader.import_default_modules()  # what a worker does at start: autodiscovers tasks.celery_tasks
    assert set(dispatch.TASK_NAMES) <= set(app.tasks)


def test_it_refuses_a_name_that_is_not_a_task():
    import pytest

    with pytest.raises(ValueError, match="unknown task"):
        dispatch.task_enqueue_on_commit("gapwatch.nope", 1)
