"""A tenant's move between cells as each cell stores it (docs/cells.md, "Moving a tenant";
the steps are the edge's, ``edge/moves.py``; the shifts and the import are use cases,
``app/moves.py``):

    copied.py      what a move copies: the tables, in order, each with the tenant's rows;
                   which values travel sealed, and what each is bound to
    states.py      the tenant's state in its move: read, held for a shift, written; its
                   schedules stopped by the freeze (the firer's fence) and due again at
                   home; every write of its own callers ordered against the freeze
    exports.py     the frozen tenant's definitions read once, sealed values opened
    imports.py     a document checked and written in the target, sealed anew; an
                   arriving tenant's import removed
    repository.py  ``Store.moves``: the plain reads and writes (status, export, a
                   program's bytes out and in, an import taken back)
"""
