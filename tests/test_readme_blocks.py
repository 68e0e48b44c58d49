"""Every package README's bench block is exactly what its committed records generate."""

from methodkit.bench import readme


def test_readme_block_matches_the_committed_records(package):
    path = package.dir / "README.md"
    text = path.read_text()
    assert text.count(readme.START) == 1, f"{path} needs one {readme.START} marker"
    expected = readme.splice(text, readme.render(package.dir), str(path))
    assert text == expected, (
        f"{path}: the bench block differs from bench/results/*.json; "
        f"run `make readme PKG={package.dist}`"
    )


def test_a_hand_edit_in_the_block_is_caught(probe):
    path = probe.dir / "README.md"
    text = path.read_text()
    assert readme.splice(text, readme.render(probe.dir)) == text
    edited = text.replace("No benchmark record is committed yet", "| hand | typed |")
    assert readme.splice(edited, readme.render(probe.dir)) != edited
