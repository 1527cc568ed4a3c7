"""Write notebooks/02_guidelines.ipynb and 03_what_if.ipynb: calls specplan.docgen.notebooks.main."""

from specplan.docgen.notebooks import main

if __name__ == "__main__":
    main()
