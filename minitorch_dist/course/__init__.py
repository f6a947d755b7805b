"""The course and book machinery: what builds, checks, hands out and grades the book, beside (not
inside) what the chapters teach. Nothing a chapter teaches imports it; it may import the chapters.

    make            the README's commands: book, test, quick, execute, notebooks
    release         the student edition (solutions stubbed); edition: its repository, README
                    and submission.json; autograder: the Gradescope bundle; submit: a
                    student's zip
    grade           the grader (score table, results.json); grade_report: reasons, "needs
                    labNN.k first"
    answers         check_answer for notebook exercises, against answer_digests (generated)
    results         the committed benchmark results the chapters read (benchmarks/results/)
    vendor          the book's own MathJax, require.js and widget embedder (pinned, offline)
    book_links      Sphinx extension: Colab twins of the chapters, bibliography labels
    repository      the repository's address, one setting (_config.yml) that the rest follows
    course_book     Sphinx extension: the book shows the stubs, not the solutions
    book_outputs    Sphinx extension: figures' descriptions as alt text, short paths
    browser_check   the built book in headless Chromium (browser_check_page: the checks)
    kernel_ports    build and nbval kernels on ports no forked rank takes; kernel_gc: those
                    kernels keep their imports out of the garbage collector's walk
    machine         make's speed and core-busy lines

Their old names (``minitorch_dist.grade``, ``python -m minitorch_dist.make``) still work: see
``minitorch_dist._moved``. Standard library only here: ``python -m minitorch_dist.make`` runs
before anything is installed.
"""
