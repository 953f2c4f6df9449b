"""The Parquet output's storage: local folders and the URIs ``pyarrow.fs``
knows, for publishing a staged output in place."""

from __future__ import annotations

from pathlib import Path


class OutputFiles:
    """The few file operations the Parquet sink needs, through
    ``pyarrow.fs``, done by the job's driver side: in a Spark Connect client
    that is the Celery worker's process, so the output location must be one
    that the worker and Spark's executors share (a local or network folder,
    ``hdfs://``, ``s3://``/``s3a://``, ``gs://``)."""

    def __init__(self) -> None:
        self._fs: dict[str, tuple] = {}

    def _resolve(self, uri: str):
        from pyarrow import fs

        if "://" not in uri:
            return fs.LocalFileSystem(), str(Path(uri).absolute())
        scheme, _, rest = uri.partition("://")
        if scheme == "file":
            return fs.LocalFileSystem(), "/" + rest.lstrip("/")
        # Hadoop's S3 connector is s3a://; pyarrow's is s3://, the same buckets.
        filesystem, path = fs.FileSystem.from_uri(("s3" if scheme == "s3a" else scheme) + "://" + rest)
        return filesystem, path

    def _info(self, uri: str):
        filesystem, path = self._resolve(uri)
        return filesystem, path, filesystem.get_file_info(path)

    def exists(self, uri: str) -> bool:
        from pyarrow import fs

        return self._info(uri)[2].type != fs.FileType.NotFound

    def delete(self, uri: str) -> None:
        from pyarrow import fs

        filesystem, path, info = self._info(uri)
        if info.type == fs.FileType.Directory:
            filesystem.delete_dir(path)
        elif info.type != fs.FileType.NotFound:
            filesystem.delete_file(path)

    def rename(self, source: str, target: str) -> None:
        """A move; where the file system cannot move a folder (object stores:
        Arrow's S3 refuses), a copy of every file, then the source deleted,
        as Hadoop's s3a rename does."""
        from pyarrow import fs

        filesystem, source_path = self._resolve(source)
        target_path = self._resolve(target)[1]
        try:
            filesystem.move(source_path, target_path)
            return
        except NotImplementedError:
            pass
        for info in filesystem.get_file_info(fs.FileSelector(source_path, recursive=True)):
            if info.type == fs.FileType.File:
                copy = target_path + info.path[len(source_path):]  # listed in the form source_path was given
                filesystem.create_dir(copy.rsplit("/", 1)[0], recursive=True)
                filesystem.copy_file(info.path, copy)
        filesystem.delete_dir(source_path)

    def siblings(self, folder: str, prefix: str) -> list[str]:
        """Entries of ``folder`` whose names start with ``prefix``, as URIs under ``folder``."""
        from pyarrow import fs

        filesystem, path = self._resolve(folder)
        try:
            found = filesystem.get_file_info(fs.FileSelector(path, allow_not_found=True))
        except FileNotFoundError:
            return []
        return [f"{folder.rstrip('/')}/{info.base_name}" for info in found if info.base_name.startswith(prefix)]

    def parquet_footers(self, folder: str, column: str) -> list[tuple[dict[str, str], int, int | None, int | None]]:
        """Every Parquet data file under ``folder`` as its footer says: the
        ``name=value`` folder levels above it (Spark's escaping undone), its
        rows, and the least and greatest value of ``column`` (None when a
        row group has no statistics for it). Reads footers only, never data."""
        from urllib.parse import unquote

        import pyarrow.parquet as pq
        from pyarrow import fs

        filesystem, path = self._resolve(folder)
        footers = []
        for info in filesystem.get_file_info(fs.FileSelector(path, recursive=True)):
            if info.type != fs.FileType.File or not info.base_name.endswith(".parquet"):
                continue
            levels = dict(unquote(part).split("=", 1) for part in info.path[len(path):].strip("/").split("/")[:-1]
                          if "=" in part)
            with filesystem.open_input_file(info.path) as handle:
                metadata = pq.ParquetFile(handle).metadata
            index = metadata.schema.names.index(column) if column in metadata.schema.names else None
            low = high = None
            for group in range(metadata.num_row_groups if metadata.num_rows else 0):
                statistics = metadata.row_group(group).column(index).statistics if index is not None else None
                if statistics is None or not statistics.has_min_max:
                    low = high = None
                    break
                low = statistics.min if low is None else min(low, statistics.min)
                high = statistics.max if high is None else max(high, statistics.max)
            footers.append((levels, metadata.num_rows, low, high))
        return footers

    def write_text(self, uri: str, text: str) -> None:
        filesystem, path = self._resolve(uri)
        with filesystem.open_output_stream(path) as stream:
            stream.write(text.encode())
