from job.command import main

main()
