from tunehost.cli import main

main()
