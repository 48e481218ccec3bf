"""The eval's tasks, one module each (``rag-position eval <task>``), with the data they
build (:mod:`.datasets`, :mod:`.retrieval`) and the 200-question reference quick reads."""
